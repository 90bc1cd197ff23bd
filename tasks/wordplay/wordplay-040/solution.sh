printf '%s\n' dleif > answer.txt
