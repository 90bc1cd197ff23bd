printf '%s\n' dniw > answer.txt
