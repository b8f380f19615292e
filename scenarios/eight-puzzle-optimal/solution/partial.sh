#!/usr/bin/env bash
# A plausible half-solution: a breadth-first search per board, capped at 14 moves to stay fast.
# Right on shallow boards; deeper ones are wrongly reported as unsolvable.
set -euo pipefail
cat > /app/solve8.py <<'EOF'
#!/usr/bin/env python3
import sys
from collections import deque

GOAL = "123456780"
DELTA = {"U": -3, "D": 3, "L": -1, "R": 1}
LIMIT = 14


def neighbours(state):
    b = state.index("0")
    for m, d in DELTA.items():
        if (m == "U" and b < 3) or (m == "D" and b > 5) or (m == "L" and b % 3 == 0) or (m == "R" and b % 3 == 2):
            continue
        s = list(state)
        s[b], s[b + d] = s[b + d], s[b]
        yield m, "".join(s)


def solve(board):
    seen = {board: ""}
    queue = deque([board])
    while queue:
        s = queue.popleft()
        if s == GOAL:
            return seen[s]
        if len(seen[s]) >= LIMIT:
            continue
        for m, n in neighbours(s):
            if n not in seen:
                seen[n] = seen[s] + m
                queue.append(n)
    return "unsolvable"


for line in sys.stdin.read().splitlines():
    print(solve(line.strip()))
EOF
chmod 0755 /app/solve8.py
