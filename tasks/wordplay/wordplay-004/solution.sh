printf '%s\n' hsif > answer.txt
