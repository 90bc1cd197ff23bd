printf '%s\n' thgil > answer.txt
