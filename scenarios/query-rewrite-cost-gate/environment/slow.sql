SELECT c.id,
       c.name,
       (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id AND o.status = 'paid') AS paid_orders,
       (SELECT COALESCE(SUM(oi.qty * oi.unit_cents), 0)
          FROM order_items oi
         WHERE oi.order_id IN (SELECT o.id FROM orders o WHERE o.customer_id = c.id AND o.status = 'paid')) AS revenue_cents,
       (SELECT MAX(o.day) FROM orders o WHERE o.customer_id = c.id) AS last_order_day
  FROM customers c
 WHERE c.region IN ('EU', 'UK')
 ORDER BY revenue_cents DESC, c.id ASC;
