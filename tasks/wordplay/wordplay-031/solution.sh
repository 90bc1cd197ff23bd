printf '%s\n' nedrag > answer.txt
