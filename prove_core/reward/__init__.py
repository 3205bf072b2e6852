"""``prove reward``: the reward contract — rollouts, components, live forks, the combiner
(``core``) — the tool-call parsing contract (``parsing``), the multi-turn loop that plays a policy
on live sessions into the rollouts the reward scores (``rollout``), and reports (``report``)."""
