printf '%s\n' drib > answer.txt
