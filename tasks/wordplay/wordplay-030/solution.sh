printf '%s\n' eldnac > answer.txt
