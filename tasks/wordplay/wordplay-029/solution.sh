printf '%s\n' hcaeb > answer.txt
