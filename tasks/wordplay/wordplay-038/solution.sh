printf '%s\n' wons > answer.txt
