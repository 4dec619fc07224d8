-- Rejected rows of one day's impression loads, by source and reason (items are not day-partitioned).
SELECT partition_date, source, reason, source_file, count(*) AS rejected_rows
FROM {{ source('raw', 'quarantine') }}
WHERE partition_date = $partition_date
GROUP BY ALL
