"""The cycle's steps as library code: functions from what they are given to what they return."""
