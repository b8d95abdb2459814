"""Routing rules that send items to a person before they move on."""
