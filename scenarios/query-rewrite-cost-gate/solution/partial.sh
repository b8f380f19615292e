#!/usr/bin/env bash
# A plausible half-solution: one join and GROUP BY. Fast and right on tidy data, but the inner
# joins drop customers without orders and orders without items, and SUM over only-NULL
# quantities gives NULL instead of 0.
set -euo pipefail
cat > /app/fast.sql <<'EOF'
SELECT c.id,
       c.name,
       COUNT(DISTINCT CASE WHEN o.status = 'paid' THEN o.id END) AS paid_orders,
       SUM(CASE WHEN o.status = 'paid' THEN oi.qty * oi.unit_cents ELSE 0 END) AS revenue_cents,
       MAX(o.day) AS last_order_day
  FROM customers c
  JOIN orders o ON o.customer_id = c.id
  JOIN order_items oi ON oi.order_id = o.id
 WHERE c.region IN ('EU', 'UK')
 GROUP BY c.id
 ORDER BY revenue_cents DESC, c.id ASC
EOF
chmod 0755 /app/fast.sql
