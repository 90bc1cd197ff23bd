printf '%s\n' elims > answer.txt
