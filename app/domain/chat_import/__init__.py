"""Import of ChatGPT and Claude exports (and JSON Lines of messages) as sessions."""
