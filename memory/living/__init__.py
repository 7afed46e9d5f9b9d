"""Living: what happens to memories once they are held.

after_turn (one model judgement per line: importance, standing, facts), relationships (how each
agent stands with each other one), reflection (insights over recent memories), consolidation
(old, similar memories become one summary, and the way back). Decay is read at recall time
(memory.recalling.scoring).
"""
