printf '%s\n' neerg > answer.txt
