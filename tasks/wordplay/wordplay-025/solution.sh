printf '%s\n' niart > answer.txt
