"""What the writer sets in the story: stage directions and who is in the room, the calendar, the comings and goings a line makes, planted beliefs."""
