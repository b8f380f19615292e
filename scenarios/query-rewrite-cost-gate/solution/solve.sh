#!/usr/bin/env bash
# Reference solution: writes /app/fast.sql (one pass per table, hash aggregation, LEFT JOINs).
set -euo pipefail
cat > /app/fast.sql <<'EOF'
WITH paid AS (
  SELECT customer_id, COUNT(*) AS n
    FROM orders
   WHERE status = 'paid'
   GROUP BY customer_id
), revenue AS (
  SELECT o.customer_id, SUM(oi.qty * oi.unit_cents) AS cents
    FROM orders o
    JOIN order_items oi ON oi.order_id = o.id
   WHERE o.status = 'paid'
   GROUP BY o.customer_id
), latest AS (
  SELECT customer_id, MAX(day) AS day
    FROM orders
   GROUP BY customer_id
)
SELECT c.id,
       c.name,
       COALESCE(paid.n, 0) AS paid_orders,
       COALESCE(revenue.cents, 0) AS revenue_cents,
       latest.day AS last_order_day
  FROM customers c
  LEFT JOIN paid ON paid.customer_id = c.id
  LEFT JOIN revenue ON revenue.customer_id = c.id
  LEFT JOIN latest ON latest.customer_id = c.id
 WHERE c.region IN ('EU', 'UK')
 ORDER BY revenue_cents DESC, c.id ASC
EOF
chmod 0755 /app/fast.sql
