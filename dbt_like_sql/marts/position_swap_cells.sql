-- config: partitioned=daily, group=position_bias
-- Impressions and clicks per position x original_position of adjacent-swap traffic, one partition per day:
-- the adjacent_swap estimator compares the two items swapped between slots j-1 and j at both slots.
SELECT
    partition_date,
    policy,
    position,
    original_position,
    CAST(count(*) AS BIGINT) AS impressions,
    CAST(sum(click) AS BIGINT) AS clicks
FROM {{ ref('stg_randomized_impressions') }}
WHERE partition_date = $partition_date
  AND policy = 'adjacent_swap'
GROUP BY partition_date, policy, position, original_position
