"""Forming: how a memory comes to be.

sheets and seed_specs (what a character's or a scene's sheet gives, as memories to store), seeding
(storing them, in batches), chunking (long fields in sentences), capture (what an agent heard
becomes its memory), importance (how much a line matters, whether it is kept), distortion (how a
character twists what it hears, recalls and links), extraction (feelings, lessons and facts a line
leaves besides itself).
"""
