printf '%s\n' esuoh > answer.txt
