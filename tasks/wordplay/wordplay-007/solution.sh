printf '%s\n' enots > answer.txt
