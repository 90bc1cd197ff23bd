printf '%s\n' elbat > answer.txt
