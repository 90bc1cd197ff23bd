printf '%s\n' eert > answer.txt
