printf '%s\n' maerd > answer.txt
