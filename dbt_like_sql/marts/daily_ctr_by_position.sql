-- Daily impressions, clicks and CTR by policy x position x group, over observational and randomized traffic.
WITH impressions AS (
    SELECT partition_date, policy, position, group_id, click FROM {{ ref('stg_observational_impressions') }}
    WHERE partition_date = $partition_date
    UNION ALL
    SELECT partition_date, policy, position, group_id, click FROM {{ ref('stg_randomized_impressions') }}
    WHERE partition_date = $partition_date
)
SELECT
    partition_date, policy, position, coalesce(group_id, '<unknown>') AS group_label,
    count(*) AS impressions, sum(click) AS clicks, avg(click) AS ctr
FROM impressions
GROUP BY ALL
