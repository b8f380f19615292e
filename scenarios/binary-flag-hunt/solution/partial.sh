#!/usr/bin/env bash
# A plausible half-solution: what `strings | grep` finds. Plain ASCII flags only.
set -euo pipefail
cat > /app/findflag.sh <<'EOF'
#!/usr/bin/env bash
flag=$(grep -aoE 'FLAG\{[a-z0-9_]{8,40}\}' "$1" | head -n 1)
[ -n "$flag" ] || exit 1
echo "$flag"
EOF
chmod 0755 /app/findflag.sh
