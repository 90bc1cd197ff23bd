printf '%s\n' thgin > answer.txt
