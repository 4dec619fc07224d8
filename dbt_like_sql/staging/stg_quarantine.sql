-- config: materialized=view
-- Rejected rows of impression loads, counted by day, source, reason and file (items are not day-partitioned).
SELECT partition_date, source, reason, source_file, count(*) AS rejected_rows
FROM {{ source('raw', 'quarantine') }}
WHERE partition_date IS NOT NULL
GROUP BY ALL
