printf '%s\n' teiuq > answer.txt
