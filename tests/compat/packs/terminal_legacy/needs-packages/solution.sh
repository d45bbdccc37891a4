#!/bin/bash
jq . config.json > pretty.json
