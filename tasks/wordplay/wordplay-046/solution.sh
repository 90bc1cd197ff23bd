printf '%s\n' tserof > answer.txt
