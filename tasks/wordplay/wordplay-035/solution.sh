printf '%s\n' yenoh > answer.txt
