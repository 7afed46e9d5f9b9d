"""The simulation pages: the views, the new-run form, the URLs and the panels and pages of lines they show."""
