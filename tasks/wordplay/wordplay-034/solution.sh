printf '%s\n' wodniw > answer.txt
