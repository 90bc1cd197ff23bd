printf '%s\n' cisum > answer.txt
