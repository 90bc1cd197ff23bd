printf '%s\n' nus > answer.txt
