printf '%s\n' esuom > answer.txt
