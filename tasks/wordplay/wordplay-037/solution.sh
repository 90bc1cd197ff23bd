printf '%s\n' niar > answer.txt
