printf '%s\n' traeh > answer.txt
