printf '%s\n' revir > answer.txt
