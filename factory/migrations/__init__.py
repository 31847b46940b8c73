"""The store's schema migrations (SQL files, shipped as package data).
"""
