#!/usr/bin/env bash
# Debian's Tesseract traineddata the transcription tests read with (tesserocr's wheel ships none):
# Fraktur (script/Fraktur), frk, deu, eng, in /usr/share/tesseract-ocr/5/tessdata.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 install -y -qq tesseract-ocr-script-frak tesseract-ocr-frk tesseract-ocr-deu \
    tesseract-ocr-eng
