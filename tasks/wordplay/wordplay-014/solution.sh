printf '%s\n' daerb > answer.txt
