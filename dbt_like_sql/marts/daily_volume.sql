-- Daily data volume: accepted impressions and clicks per source, next to the rows quarantined.
WITH accepted AS (
    SELECT partition_date, 'observational' AS source, count(*) AS accepted_rows, sum(click) AS clicks
    FROM {{ ref('stg_observational_impressions') }} WHERE partition_date = $partition_date GROUP BY ALL
    UNION ALL
    SELECT partition_date, 'randomized' AS source, count(*) AS accepted_rows, sum(click) AS clicks
    FROM {{ ref('stg_randomized_impressions') }} WHERE partition_date = $partition_date GROUP BY ALL
), rejected AS (
    SELECT partition_date, source, sum(rejected_rows) AS rejected_rows
    FROM {{ ref('stg_quarantine') }} WHERE partition_date = $partition_date GROUP BY ALL
)
SELECT
    CAST($partition_date AS DATE) AS partition_date, s.source,
    coalesce(a.accepted_rows, 0) AS accepted_rows, coalesce(a.clicks, 0) AS clicks,
    coalesce(r.rejected_rows, 0) AS rejected_rows
FROM (VALUES ('observational'), ('randomized')) AS s(source)
LEFT JOIN accepted AS a USING (source)
LEFT JOIN rejected AS r USING (source)
