printf '%s\n' tsorf > answer.txt
