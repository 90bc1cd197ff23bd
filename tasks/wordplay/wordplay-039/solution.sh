printf '%s\n' mrots > answer.txt
