"""Fitting the fusion to a user's corrected pages (`newsbag tune`): protocol, search space, pages, the run."""
